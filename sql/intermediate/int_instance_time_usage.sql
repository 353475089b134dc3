-- int_instance_time_usage: how one player spent their clock in one game (chess; Fox SGFs record
-- only the time settings, so every column is null for Go).
-- Grain: one row per player per game (key: game_id, colour; unique and not null).
--
-- Reads the model `stg_moves`: clock_s (the mover's clock after the move), tc_base_s and
-- tc_increment_s (the game's time control), loss and expected_loss.
-- A move's think time is the clock it started with, plus the increment, minus the clock after
-- it: t = clock_before + inc - clock_after, floored at 0. clock_before is the mover's clock
-- after their previous move; for their first move it is the base time, and no increment is
-- added (Lichess starts a player's clock after their first move: both first moves show the
-- base). A move is in time trouble when it started with less than a tenth of the base.
--
-- Columns (the meta-models' "clock" family), each for k in {k25, k50, all} (move_number <= 25,
-- <= 50, every move) where marked <k>:
--   clock_think_base_{mean,median,std}_<k>   t / base
--   clock_think_left_{mean,median,std}_<k>   t / (clock_before + inc): the share of what was left
--   clock_trouble_share_<k>                  share of moves started in time trouble
--   clock_instant_share_<k>                  share of moves played in under a second
--   clock_opening_share_all                  time spent on the first ten moves / base
--   clock_spent_share_all                    time spent on every move / base
--   clock_longest_share_all                  the longest think / base
--   clock_end_share_all                      the clock after the last move / base (0: flagged)
--   clock_trouble_loss_mean_all              mean loss of the moves in time trouble
--   clock_trouble_loss_gap_all               that minus the mean loss of the other moves
--   clock_think_loss_corr_all                correlation of t with the move's loss
--   clock_think_eloss_corr_all               correlation of t with the position's expected loss
-- A game without clocks or without a base time gives nulls; so does a correlation over fewer
-- than three timed moves or over a constant.

with

moves as (

    select
        game_id,
        colour,
        ply,
        move_number,
        clock_s::double as clock_after,
        case when tc_base_s > 0 then tc_base_s end::double as base,
        coalesce(tc_increment_s, 0)::double as increment,
        loss::double as loss,
        expected_loss::double as expected_loss,
        case
            when move_number = 1 then tc_base_s
            else lag(clock_s) over (partition by game_id, colour order by ply)
        end::double as clock_before
    from stg_moves

),

timed as (

    select
        *,
        -- greatest() skips nulls (greatest(null, 0) = 0): a move without a clock has no time
        case when clock_before is not null and clock_after is not null then greatest(
            clock_before + case when move_number = 1 then 0 else increment end - clock_after, 0
        ) end as think,
        clock_before < 0.1 * base as in_trouble
    from moves

),

shares as (

    select
        *,
        think / base as think_base,
        think / nullif(clock_before + case when move_number = 1 then 0 else increment end, 0)
            as think_left
    from timed

),

by_instance as (

    select
        game_id,
        colour,
        avg(think_base) filter (move_number <= 25) as clock_think_base_mean_k25,
        median(think_base) filter (move_number <= 25) as clock_think_base_median_k25,
        stddev_pop(think_base) filter (move_number <= 25) as clock_think_base_std_k25,
        avg(think_left) filter (move_number <= 25) as clock_think_left_mean_k25,
        median(think_left) filter (move_number <= 25) as clock_think_left_median_k25,
        stddev_pop(think_left) filter (move_number <= 25) as clock_think_left_std_k25,
        avg(in_trouble::double) filter (move_number <= 25) as clock_trouble_share_k25,
        avg((think < 1)::double) filter (move_number <= 25) as clock_instant_share_k25,
        avg(think_base) filter (move_number <= 50) as clock_think_base_mean_k50,
        median(think_base) filter (move_number <= 50) as clock_think_base_median_k50,
        stddev_pop(think_base) filter (move_number <= 50) as clock_think_base_std_k50,
        avg(think_left) filter (move_number <= 50) as clock_think_left_mean_k50,
        median(think_left) filter (move_number <= 50) as clock_think_left_median_k50,
        stddev_pop(think_left) filter (move_number <= 50) as clock_think_left_std_k50,
        avg(in_trouble::double) filter (move_number <= 50) as clock_trouble_share_k50,
        avg((think < 1)::double) filter (move_number <= 50) as clock_instant_share_k50,
        avg(think_base) as clock_think_base_mean_all,
        median(think_base) as clock_think_base_median_all,
        stddev_pop(think_base) as clock_think_base_std_all,
        avg(think_left) as clock_think_left_mean_all,
        median(think_left) as clock_think_left_median_all,
        stddev_pop(think_left) as clock_think_left_std_all,
        avg(in_trouble::double) as clock_trouble_share_all,
        avg((think < 1)::double) as clock_instant_share_all,
        sum(think_base) filter (move_number <= 10) as clock_opening_share_all,
        sum(think_base) as clock_spent_share_all,
        max(think_base) as clock_longest_share_all,
        arg_max(clock_after, ply) filter (clock_after is not null) / any_value(base)
            as clock_end_share_all,
        avg(loss) filter (in_trouble) as clock_trouble_loss_mean_all,
        avg(loss) filter (in_trouble) - avg(loss) filter (not in_trouble)
            as clock_trouble_loss_gap_all,
        case
            when count(think) filter (loss is not null) >= 3 then corr(think, loss)
        end as clock_think_loss_corr_all,
        case
            when count(think) filter (expected_loss is not null) >= 3
                then corr(think, expected_loss)
        end as clock_think_eloss_corr_all
    from shares
    group by game_id, colour

),

final as (

    select
        game_id,
        colour,
        columns('^clock_') :: double
    from by_instance

)

select * from final
