-- stg_games: the games table as DuckDB users query it.
-- Grain: one row per game (key: game_id, unique and not null).
-- Reads the source `games`, a view over the ingested Parquet folder:
--   create view games as
--   select * from read_parquet('DIR/**/*.parquet', hive_partitioning = true);
-- (*.parquet leaves out DIR/_quarantine/*.pq, the unreadable games.) The catalog's <kind>_games
-- views are this model over DIR/game=<kind>/ (pipeline/core/catalog.py).
-- Keep in sync with pipeline/core/games_schema.py (GAMES_SCHEMA); tests/test_ingest_chess.py checks.

with

source as (

    select * from games

),

renamed as (

    select
        -- identity and provenance
        cast(game_id as varchar) as game_id,
        cast(game as varchar) as game,
        cast(source as varchar) as source,
        cast(month as varchar) as month,
        cast(source_file as varchar) as source_file,
        source_member,
        cast(source_index as bigint) as source_index,
        cast(source_offset as bigint) as source_offset,
        site,
        event,
        date as played_on,

        -- players
        white as white_name,
        black as black_name,
        white_rating_raw,
        black_rating_raw,
        white_rating,
        black_rating,
        white_rank,
        black_rank,
        white_rank_num,
        black_rank_num,
        white_rank_group,
        black_rank_group,
        rank_group,

        -- time control
        time_control,
        tc_base_s,
        tc_increment_s,
        tc_periods,
        tc_class,

        -- outcome and rules
        result,
        winner,
        ended_by,
        score_margin,
        termination,
        komi,
        handicap,
        rules,
        board_size,

        -- moves and their annotations
        num_plies,
        moves,
        setup_black,
        setup_white,
        clocks_s,
        evals_cp,
        selection

    from source

),

final as (

    select
        *,
        winner = 'draw' as is_draw,
        -- Go games without a date sit in month=unknown: month_start is null for them
        try_strptime(month || '-01', '%Y-%m-%d')::date as month_start
    from renamed

)

select * from final
