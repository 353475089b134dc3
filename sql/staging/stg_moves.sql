-- stg_moves: the per-move features table as DuckDB users query it.
-- Grain: one row per move played (key: game_id, ply; unique and not null).
-- Reads the relation `features`, a view over the extracted Parquet folder:
--   create view features as
--   select * from read_parquet('DIR/game=*/**/*.parquet', hive_partitioning = true);
-- (the game=* glob leaves out DIR/_quarantine/, the games extraction could not evaluate.)
-- Net columns (prior_<net>, logprior_<net>, top1_<net>, sscore_<net>) pass through unchanged
-- with COLUMNS patterns, so a net added to the extraction config needs no edit here.
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

        -- one column set per configured net
        columns('^(prior|logprior|top1|sscore)_.*')

    from source

),

final as (

    select * from renamed

)

select * from final
