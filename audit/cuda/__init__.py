"""Reading CUDA C++ source and PTX: the tokenizer, function scopes, and the static kernel-code analyses.

Everything here reads text and never runs a tool: :mod:`.tokens` (a small C/CUDA tokenizer),
:mod:`.scope` (function definitions and what an entry reaches), :mod:`.bounds` (LOCAL_ARRAY_BOUNDS),
:mod:`.uninit` (LOCAL_UNINIT_READ), :mod:`.races` (STORE_RACE, on PTX) and :mod:`.static`, the face the
build rules and ``wireup mutate`` call. The compile step (:mod:`audit.compile`: nvcc, ptxas, the cache,
ABI facts) and mutation testing (:mod:`audit.mutate`) both import this package; it imports neither.

>>> from audit.cuda.tokens import tokenize
>>> [t.text for t in tokenize("a[i] += 1;")]
['a', '[', 'i', ']', '+=', '1', ';']
"""
