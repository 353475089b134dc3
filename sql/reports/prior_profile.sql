-- prior_profile: the paper's Fig. 3 data — how well each imitation level predicts the moves of
-- each rank group: mean over player instances of the geometric mean of the played move's prior.
-- Grain: one row per game kind, rank group and imitation net (key: game, rank_group, net).
--
-- Reads the model `player_instance_features` (sql/marts/player_instance_features.sql); its
-- prior_<net>_geomean_all columns are unpivoted, so every configured net appears.
-- ci95 is the half-width of a normal 95 % interval of the mean (1.96 · sd / √instances).

with

instances as (

    select * from player_instance_features
    where rank_group is not null

),

long as (

    unpivot instances
    on columns('^prior_.+_geomean_all$')
    into name column_name value geomean

),

final as (

    select
        game,
        rank_group,
        regexp_extract(column_name, '^prior_(.+)_geomean_all$', 1) as net,
        avg(geomean) as geomean_mean,
        1.96 * stddev_samp(geomean) / sqrt(count(geomean)) as geomean_ci95,
        count(geomean) as instances
    from long
    group by game, rank_group, column_name
    order by game, rank_group, net

)

select * from final
