"""MalleTrain (online scalability profiling for malleable jobs on transient nodes): its job
profiler (``jpa``) and the ``malletrain``/``freetrain`` policies. docs/bftrainer.md."""
