"""Datasets: typed tables (:mod:`~recagent_gym.data.schema`: ``Dataset``, ``DataError``), loaders for the MovieLens
formats and RecAgent CSV (:mod:`~recagent_gym.data.load`: ``load_dataset``, ``load_dataset_from_config``), the
bundled MovieLens latest-small, download, and splits.

Import from the modules: this ``__init__`` stays empty so that the configuration section
(:mod:`~recagent_gym.data.config`) is importable without pandas and the loaders.
"""
