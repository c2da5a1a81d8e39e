"""A campaign before it runs: what a profile costs in GPU-hours and disk (:mod:`.plan`, ``sentlab plan``) and
which stages fill one paper table (:mod:`.scope`, ``sentlab run --table``)."""
