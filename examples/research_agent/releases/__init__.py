"""The research agent's next release, deployed over runs of the current one (`make demo`'s
last phase; README "Changing workflow code").

Release 2 fact-checks the research before the analysis: one more step, `fact_check`, between
`research_2` and `analyze`. A run of release 1 waiting for its approval has already analyzed:
its journal records `analyze` where release 2's code calls `fact_check`.

- `unsafe`: release 2 as first written. `perdure replay` finds that every open run of release
  1 past its research no longer replays, and names the call.
- `patched`: the same change behind `ctx.patched("fact-check")`: a run that went past the
  research on release 1 keeps its path, a run that gets there on release 2 (a new one, or an
  old one still researching) takes the new one. The gate passes it, and so does the deploy.
"""
