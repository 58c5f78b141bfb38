"""HadarE: Hadar with job forking. Each job is forked into per-node copies so that no node idles;
a Job Tracker (``tracker/``) sums the copies' steps and averages their parameters each round."""
