"""Design-space sweeps: a YAML specification (:mod:`~search.sweeps.spec`), one trial
(:mod:`~search.sweeps.trial`), the Optuna ask/tell driver on Ray with Parquet records
(:mod:`~search.sweeps.driver`) and the canonical small sweep
(:mod:`~search.sweeps.quickstart`)."""
