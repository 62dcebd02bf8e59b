"""Pure: the on-disk index of a build and what scores it. The mapped files (BM25 postings, vectors),
the IVF lists, the lexical top-k, and the vector codec. No models, no settings."""
