"""The models recall and writing use: embedders, rerankers and language models behind small Protocols,
and how they are found, loaded and run (``providers``)."""
