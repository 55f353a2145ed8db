"""Flow control at grant time: what tasks declare (concurrency and rate keys, a priority, a
fairness key, an estimate), the limits and budgets operators set, and the claim that weighs
them all before a grant (docs/api.md, "Flow control")."""
