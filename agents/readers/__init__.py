"""Readers: what turns the evidence a retriever found into an answer, one kind a module.

A policy made of a retriever and a reader (hybrid) packs the ranking to the reader's budget and hands
it over as a `Reading` (base.py); the reader answers from it: `letters` by the option letters'
log-probabilities, `claims` by setting a claim against versions of itself, `json_answer` by a written
JSON answer citing the evidence ids. Each is registered by name (`registry.py`, factories in `builtin.py`,
plug-ins through `moviemem.register("reader", ...)` or the entry-point group `moviemem.readers`), and a policy
picks one by name, with the reader's own settings where it is named (`letters(rotations=one)`; the built-ins'
in `settings.py`, a plug-in's in its own `Settings` dataclass). `order_locate` is a step before retrieval
(`base.BeforeRetrieval`), not a reader: it answers order questions by locating each option in the film, and
declines where the located order does not decide.
`cite` names the evidence block an answer read from log-probabilities rests on (one short follow-up), so every
reader cites.
"""
