"""The baselines the five systems are compared with, behind the shared policy interface: Gavel
(max-min fairness, FIFO, min-makespan), Tiresias (2D-LAS), YARN's capacity scheduler, Themis
and Optimus+Oracle. The systems themselves have their own packages (``hadar``, ``hadare``,
``pollux``, ``afs``, ``bftrainer``, ``malletrain``). See docs/baselines.md."""
