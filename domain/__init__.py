"""The rules as plain functions over plain data (docs/architecture.md, "Layers").

Every struct here is `gc=False` and keeps its arrays as tuples. Values are never in a reference cycle,
and a worker keeps thousands of rows decoded (processors/state/row_cache.py): tracked, each of their lists
and structs was one more object for every full collection to walk (docs/decisions/0017-call-rows-kept-decoded.md).
"""
