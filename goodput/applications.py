"""The applications whose measurements Pollux published (bundled as traces, ``goodput.traces``);
a light module, so that reading a job file does not load the traces' libraries."""

APPLICATIONS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
"""The six applications Pollux measured (its Table 1)."""
