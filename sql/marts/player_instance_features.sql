-- player_instance_features: one player's moves in one game summarised into the features of
-- Kuboki et al. (2025) and the difficulty-corrected losses of the thesis on position difficulty.
-- Grain: one row per player per game (key: game_id, colour; unique and not null).
--
-- Reads the model `stg_moves` (sql/staging/stg_moves.sql: the per-move features table) and the
-- model `int_instance_time_usage` (the time-usage columns, on the same grain).
-- Parameters, DuckDB variables (the defaults below apply when they are unset):
--   set variable alpha = 0.1;   -- α in (6.1)–(6.3): keeps easy positions (E ≈ 0) from dividing by 0
--   set variable gamma = 1.0;   -- γ in (6.3), (6.4): weight of the difficulty correction
--
-- Columns, each for k in {k25: move_number <= 25, k50: move_number <= 50, all}:
--   prior_<net>_geomean_<k>   geometric mean of the played move's prior, exp(avg(logprior_<net>));
--                             logprior_<net> is floored at log(1e-6) by extraction, so one move
--                             an imitation net thinks impossible cannot drive the mean to -inf
--   top1_<net>_rate_<k>       share of moves that were the net's most likely move
--   loss_{mean,median,std}_<k>, sscore_<net>_{mean,median,std}_<k>   (std: population std, 0
--                             for one move); one COLUMNS pattern covers loss and every s-score
--                             net, so the file binds even when no strength net is configured
--   loss_c6{1,2,3,4}_mean_<k> the difficulty-corrected losses with E = expected_loss:
--                             (6.1) loss / (E + α)            (6.2) (loss + α) / (E + α)
--                             (6.3) loss + γ (loss − E) / (E + α)
--                             (6.4) loss + γ (loss − E) / (loss + E), 0/0 taken as 0
--                             loss and E are floored at 0 here: a negative value is search noise
--                             (a move cannot beat best play) and would make E + α ≤ 0 possible
--   moves_<k>, moves_with_loss_<k>
--   clock_…_<k>               how the player spent their clock (the model
--                             int_instance_time_usage; null where the games carry no clock, as
--                             Fox SGFs do not); tc_base_s, tc_increment_s: the game's time control
-- Every imitation / strength net's columns appear through COLUMNS(…) star expressions: adding
-- a net to the extraction config needs no edit here. Their patterns are template calls that
-- pipeline/core/catalog.py (render_sql) fills in from pipeline/core/features_schema.py, the one
-- place the <family>_<net> column names are made: net_columns('top1', …) matches the columns of
-- those families ('^(top1|…)_.+$'), net_column('logprior') captures the net as \1
-- ('^logprior_(.+)$'); `kibitz aggregate --sql player_instance_features` prints the result.
-- Keep in sync with pipeline/core/features_schema.py (the input) and pipeline/meta/aggregate.py
-- (AggregateConfig: the α, γ defaults; FEATURE_SUFFIXES).

with

params as (

    select
        coalesce(getvariable('alpha'), 0.1)::double as alpha,
        coalesce(getvariable('gamma'), 1.0)::double as gamma

),

moves as (

    select
        game_id,
        colour,
        game,
        source,
        month,
        player,
        opponent,
        rating,
        rank,
        rank_num,
        rank_group,
        tc_base_s,
        tc_increment_s,
        move_number,
        loss::double as loss,
        -- greatest() skips nulls (greatest(null, 0) = 0): keep a missing value missing
        case when loss is not null then greatest(loss, 0) end::double as loss_floored,
        case when expected_loss is not null then greatest(expected_loss, 0) end::double
            as expected_loss_floored,
        columns({{ net_columns('logprior', 'top1', 'sscore') }})
    from stg_moves

),

corrected as (

    select
        moves.*,
        loss_floored / (expected_loss_floored + alpha) as loss_c61,
        (loss_floored + alpha) / (expected_loss_floored + alpha) as loss_c62,
        loss_floored
            + gamma * (loss_floored - expected_loss_floored) / (expected_loss_floored + alpha)
            as loss_c63,
        loss_floored
            + case
                when loss_floored + expected_loss_floored = 0 then 0
                else gamma * (loss_floored - expected_loss_floored)
                    / (loss_floored + expected_loss_floored)
            end as loss_c64
    from moves
    cross join params

),

-- One CTE per cut-off with a WHERE instead of FILTER clauses on every aggregate: DuckDB then
-- scans each subset once (about 2× faster on 9 nets; bench/speed/bench_aggregate.py).

first_25 as (

    select
        game_id,
        colour,
        exp(avg(columns({{ net_column('logprior') }}))) as "prior_\1_geomean_k25",
        avg(columns({{ net_column('top1') }})::double) as "top1_\1_rate_k25",
        avg(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_mean_k25",
        median(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_median_k25",
        stddev_pop(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_std_k25",
        avg(columns('^(loss_c6[1-4])$')) as "\1_mean_k25",
        count(*) as moves_k25,
        count(loss) as moves_with_loss_k25
    from corrected
    where move_number <= 25
    group by game_id, colour

),

first_50 as (

    select
        game_id,
        colour,
        exp(avg(columns({{ net_column('logprior') }}))) as "prior_\1_geomean_k50",
        avg(columns({{ net_column('top1') }})::double) as "top1_\1_rate_k50",
        avg(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_mean_k50",
        median(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_median_k50",
        stddev_pop(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_std_k50",
        avg(columns('^(loss_c6[1-4])$')) as "\1_mean_k50",
        count(*) as moves_k50,
        count(loss) as moves_with_loss_k50
    from corrected
    where move_number <= 50
    group by game_id, colour

),

every_move as (

    select
        game_id,
        colour,
        any_value(game) as game,
        any_value(source) as source,
        any_value(month) as month,
        any_value(player) as player,
        any_value(opponent) as opponent,
        any_value(rating) as rating,
        any_value(rank) as rank,
        any_value(rank_num) as rank_num,
        any_value(rank_group) as rank_group,
        any_value(tc_base_s) as tc_base_s,
        any_value(tc_increment_s) as tc_increment_s,
        exp(avg(columns({{ net_column('logprior') }}))) as "prior_\1_geomean_all",
        avg(columns({{ net_column('top1') }})::double) as "top1_\1_rate_all",
        avg(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_mean_all",
        median(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_median_all",
        stddev_pop(columns({{ net_columns('sscore', also=['loss']) }})) as "\1_std_all",
        avg(columns('^(loss_c6[1-4])$')) as "\1_mean_all",
        count(*) as moves_all,
        count(loss) as moves_with_loss_all
    from corrected
    group by game_id, colour

),

-- every instance has a first move, so the three joins keep every instance
aggregated as (

    select
        every_move.game_id,
        every_move.colour,
        columns(
            '^(game|source|month|player|opponent|rating|rank|rank_num|rank_group|tc_base_s'
            || '|tc_increment_s)$'
        ),
        columns('_k25$'),
        columns('_k50$'),
        columns('_all$')
    from every_move
    left join first_25 using (game_id, colour)
    left join first_50 using (game_id, colour)
    left join int_instance_time_usage using (game_id, colour)

),

final as (

    select * from aggregated
    order by game, source, game_id, colour

)

select * from final
