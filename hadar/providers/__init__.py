"""The node providers: what runs on the coordinator to reach the machines of a cluster (list,
launch and terminate them, check them, move files and run the worker there). What runs on a node
(the worker, the models, the datasets, the checkpoint format) is the ``nodes`` package; neither
imports the other."""
