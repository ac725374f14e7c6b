"""Finding evidence for a question in a film's memory, without a model.

Two kinds of retriever, llama-index's shape for both (a public `retrieve()` around an abstract one):
primitive ones (`base.Retriever`: text, frames, graph, window, characters) answer one query string;
question-level ones (`gather.QuestionRetriever`, registered by name in `registry.py`) answer a
`Question` with a ranking and cut it to a reader's token budget. The built-in `Routed` searches the
channels the question's wording routes to (`routing.py`; each a registered channel retriever, `channels.py`),
then runs the postprocessor steps its settings name, each with its own settings (`postprocess.py`: fuse,
informative-first, widen, rerank, fit-budget, or a plug-in's). The values
both sides trade, `Question` and `Evidence`, sit at the bottom in `types.py`.
"""
