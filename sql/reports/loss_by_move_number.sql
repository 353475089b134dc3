-- loss_by_move_number: the paper's Fig. 4 data — mean and spread of the move's loss by the
-- mover's move number, per rank group.
-- Grain: one row per game kind, rank group and move number (key: game, rank_group, move_number).
--
-- Reads the model `stg_moves` (sql/staging/stg_moves.sql: the per-move features table).
-- Parameter: set variable max_move_number = 80; (default 80: later moves are few and noisy).

with

moves as (

    select game, rank_group, move_number, loss
    from stg_moves
    where rank_group is not null
        and loss is not null
        and move_number <= coalesce(getvariable('max_move_number'), 80)

),

final as (

    select
        game,
        rank_group,
        move_number,
        avg(loss) as loss_mean,
        stddev_samp(loss) as loss_std,
        count(*) as moves
    from moves
    group by game, rank_group, move_number
    order by game, rank_group, move_number

)

select * from final
