-- player_features: every game of one player summarised: the mean over their player instances
-- of each instance feature (what a meta-model sees for n = all of the player's games),
-- game counts and the months they span.
-- Grain: one row per player per game kind and source (key: game, source, player; unique and
-- not null; instances without a player name are left out).
--
-- Reads the model `player_instance_features` (sql/marts/player_instance_features.sql).
-- Feature columns are the instance columns ending in _k25 / _k50 / _all, found by COLUMNS('…'):
-- a new net's columns appear here without an edit. moves_<k> become moves per game.
-- Keep in sync with sql/marts/player_instance_features.sql.

with

instances as (

    select * from player_instance_features
    where player is not null

),

aggregated as (

    select
        game,
        source,
        player,
        count(*) as games,
        count(*) filter (where colour = 'white') as games_as_white,
        sum(moves_all) as moves,
        min(month) as first_month,
        max(month) as last_month,
        mode(rank_group) as rank_group,
        count(distinct rank_group) as rank_groups_seen,
        avg(rating) as rating_mean,
        min(rating) as rating_min,
        max(rating) as rating_max,
        mode(rank) as rank,
        avg(rank_num) as rank_num_mean,
        avg(columns('_(k25|k50|all)$')) as "\0"
    from instances
    group by game, source, player

),

final as (

    select * from aggregated
    order by game, source, player

)

select * from final
