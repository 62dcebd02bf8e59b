"""The remote model calls both apps make besides embedding: the answerability judge and the reranker.

Pure HTTP clients: the caller passes the endpoint, model and key (no settings, no models), and a
caller charges the ledger itself. `http` holds what they and the embedding backend share.
"""
