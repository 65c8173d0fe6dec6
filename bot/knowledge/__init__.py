"""The knowledge base: the business's own documents, chunked, stored and searched.

Ingestion (extract.py, chunking.py, library.py) runs apart from retrieval (index.py,
retrieval.py): an index is built once per knowledge-base version in each process and
queried on the message path.
"""
