-- stg_moves: the per-move features table as DuckDB users query it.
-- Grain: one row per move played (key: game_id, ply; unique and not null).
-- Reads the source `features`, a view over the extracted Parquet folder:
--   create view features as
--   select * from read_parquet('DIR/**/*.parquet', hive_partitioning = true);
-- (*.parquet leaves out DIR/_quarantine/*.pq, the games extraction could not evaluate.)
-- Every mart reads the moves through this model; the catalog's <kind>_features views are it.
-- Net columns (prior_<net>, logprior_<net>, top1_<net>, sscore_<net>) pass through unchanged
-- with a COLUMNS pattern, so a net added to the extraction config needs no edit here. The
-- pattern is a template call that pipeline/core/catalog.py (render_sql) fills in from
-- pipeline/core/features_schema.py; `kibitz aggregate --sql stg_moves` prints the filled-in text.
-- Keep in sync with pipeline/core/features_schema.py; tests/test_extract_chess.py reads it.

with

source as (

    select * from features

),

renamed as (

    select
        -- identity and partitions
        cast(game_id as varchar) as game_id,
        cast(game as varchar) as game,
        cast(source as varchar) as source,
        cast(month as varchar) as month,
        cast(ply as integer) as ply,
        cast(move_number as integer) as move_number,
        cast(colour as varchar) as colour,

        -- the mover
        player,
        opponent,
        rating,
        rank,
        rank_num,
        rank_group,

        -- the move
        played_move,
        cast(num_legal as smallint) as num_legal,

        -- evaluations, mover's view (chess: logit of the win rate; Go: score lead in points)
        v_before,
        v_after,
        loss,
        expected_loss,
        expected_loss_moves,
        clock_s,  -- the mover's clock after the move, seconds
        tc_base_s,  -- the game's base time, seconds
        tc_increment_s,  -- chess: the increment; Go: the byo-yomi period, seconds

        -- one column set per configured net
        columns({{ net_columns('prior', 'logprior', 'top1', 'sscore') }})

    from source

),

final as (

    select * from renamed

)

select * from final
