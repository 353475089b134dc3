-- rank_groups: the rank groups of each game kind ordered weakest to strongest, with the index
-- the meta-models predict (0 = weakest).
-- Grain: one row per rank group per game kind (key: game, rank_group; unique and not null).
--
-- Reads the model `player_instance_features`. Strength is the mean rating (chess) or the
-- mean numeric rank (Go, games_schema's scale: 1k = 0, n k = 1 − n, n d = n) of the group's
-- instances, so "3-5k" sorts below "1-2k" below "1d" without a hand-written list.

with

instances as (

    select * from player_instance_features
    where rank_group is not null

),

groups as (

    select
        game,
        rank_group,
        avg(coalesce(rating::double, rank_num::double)) as strength_mean,
        count(*) as instances,
        count(distinct game_id) as games,
        count(distinct player) as players
    from instances
    group by game, rank_group

),

final as (

    select
        game,
        rank_group,
        (row_number() over (partition by game order by strength_mean, rank_group) - 1)::integer
            as group_index,
        strength_mean,
        instances,
        games,
        players
    from groups
    order by game, group_index

)

select * from final
