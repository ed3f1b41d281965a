"""Training a classifier (`genlab optim train`, `genlab optim measure`): the model zoo, the tasks
it trains on, label noise, and the training loop with its config.

- ``models``: the classifiers (MLP, CNN, Transformer, ResNet) built by name (``CLASSIFIERS``,
  ``build_model``, the builder every checkpoint's model record names);
- ``tasks``: the tasks (digits and their subsets, rendered shapes, a folder of images; splits,
  few-shot sets, translation) as ``TaskData``;
- ``noise``: label noise, symmetric and asymmetric;
- ``train``: ``TrainConfig`` and ``train_digits`` (one training, then every measure),
  ``MeasureRunConfig`` and ``measure_checkpoint``.

The studies (genlab.optim.studies) run lists of these trainings; nothing here imports them.
"""
