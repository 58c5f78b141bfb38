"""BFTrainer (malleable jobs on the nodes a supercomputer leaves idle, by MILP): the MILP
(``milp``) and the ``bftrainer`` policy. docs/bftrainer.md."""
