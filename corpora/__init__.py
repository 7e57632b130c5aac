"""Generated corpora, apart from the product: the sample archive (`korpus sample`, `make demo`, the tests), the
archive-style evaluation set (benchmarks/retrieval.py) and the meta-documents corpus (benchmarks/meta.py). The
product's packages (`korpus`, `tasks`, `flows`) never import them; the CLI's `sample` command does, on demand."""
