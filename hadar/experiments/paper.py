"""The paper's reported figures for its physical evaluation (section VI) and the project's targets.

Transcribed from the text of Hadar/HadarE (section VI-C/D and the abstract); the figures' bar
heights are not in the text, so only the numbers the text states are here. Ratios follow the
paper's wording: a TTD or JCT "speed-up" of A over B is ``B / A``; a CRU "gain" is ``A / B``.
"""

from __future__ import annotations

PAPER_POLICIES = ("gavel", "hadar", "hadare")
"""The policies the paper's physical evaluation compares (the experiment's default set). Their
names appear here, as the paper's data, and in their own modules; nowhere else."""

PAPER_COMPARISONS = (("hadar", "gavel"), ("hadare", "hadar"), ("hadare", "gavel"))
"""(policy, reference) pairs whose ratios the paper reports (the keys of PAPER_AVERAGES)."""

TARGET_PAIR = ("hadare", "hadar")
"""(policy, reference) of the project's targets: HadarE's TTD and CRU against Hadar's."""

PAPER_ROUND_FIGURES = {"hadare": "fig11_cru_slots_hadare.png", "hadar": "fig12_cru_slots_hadar.png"}
"""The paper's slot-sweep figures (Figs. 11-12): the policy each draws, and its file."""

PAPER_CLUSTERS = {"aws-5node": "aws", "lab-5node": "lab"}
"""Cluster name -> the paper's cluster (its Fig. X(a) is AWS, X(b) the lab testbed)."""

PAPER_AVERAGES: dict[str, dict[str, float]] = {
    # Hadar vs Gavel, per cluster (section VI-C)
    "ttd_hadar_vs_gavel": {"aws": 1.17, "lab": 1.16},
    "cru_hadar_vs_gavel": {"aws": 1.20, "lab": 1.21},
    "jct_hadar_vs_gavel": {"aws": 1.17, "lab": 1.23},
    # HadarE vs Gavel, per cluster
    "cru_hadare_vs_gavel": {"aws": 1.56, "lab": 1.62},
    "jct_hadare_vs_gavel": {"aws": 2.23, "lab": 2.76},
    # stated over both clusters ("mean speedup over all seven workload mixes"; abstract: CRU x1.45)
    "ttd_hadare_vs_hadar": {"aws": 1.79, "lab": 1.79},
    "ttd_hadare_vs_gavel": {"aws": 2.12, "lab": 2.12},
    "cru_hadare_vs_hadar": {"aws": 1.45, "lab": 1.45},
}
"""Mean over the seven mixes of the per-mix ratio, as the paper reports it."""

PAPER_M5: dict[str, dict[str, float]] = {
    "aws": {
        "ttd_gavel": 4200.0,
        "ttd_hadar": 3900.0,
        "jct_min_gavel": 1283.0,
        "jct_max_gavel": 3159.0,
        "jct_min_hadar": 1210.0,
        "jct_max_hadar": 2918.0,
    },
    "lab": {"ttd_gavel": 3300.0, "ttd_hadar": 2800.0},
}
"""M-5 values the text quotes (seconds; "some 4200 seconds" etc.)."""

TARGET_MIXES = ("M-5", "M-8", "M-10", "M-12")
TARGET_HADARE_CRU_MIN = 0.9
"""Issue 4: HadarE CRU >= 0.9 on M-5 ... M-12."""
TARGET_HADARE_TTD_RATIO_MAX = 0.6
"""Issue 4: HadarE TTD <= 0.6 x Hadar's TTD on M-5 ... M-12."""


def paper_value(key: str, cluster: str) -> float | None:
    """The paper's mean ratio ``key`` for cluster ``cluster`` (None if not a paper cluster)."""
    short = PAPER_CLUSTERS.get(cluster)
    return None if short is None else PAPER_AVERAGES.get(key, {}).get(short)


_SMALL, _LARGE = ("M-1", "M-3", "M-4"), ("M-5", "M-8", "M-10", "M-12")
PAPER_BEST_ROUND: dict[str, dict[str, dict[str, str]]] = {
    # Fig. 11: HadarE peaks at 360 s for M-8..M-12 on AWS (M-5..M-12 on the lab), at 90 s below
    "hadare": {
        "aws": {
            **{m: "90" for m in (*_SMALL, "M-5")},
            **{m: "360" for m in ("M-8", "M-10", "M-12")},
        },
        "lab": {**{m: "90" for m in _SMALL}, **{m: "360" for m in _LARGE}},
    },
    # Fig. 12: Hadar peaks at 90 or 180 s on AWS except M-3 (360 s); lab like HadarE
    "hadar": {
        "aws": {**{m: "90/180" for m in ("M-1", "M-4", *_LARGE)}, "M-3": "360"},
        "lab": {**{m: "90" for m in _SMALL}, **{m: "360" for m in _LARGE}},
    },
}
"""Slot time (s) with the highest CRU per mix, as section VI-D states it."""


def paper_best_round(policy: str, cluster: str, mix: str) -> str | None:
    short = PAPER_CLUSTERS.get(cluster)
    return None if short is None else PAPER_BEST_ROUND.get(policy, {}).get(short, {}).get(mix)


# -- the seed systems' papers: what ``hadar reproduce NAME`` compares with ----------------------
REPRODUCED = ("hadar", "hadare", "pollux", "afs", "bftrainer", "malletrain")
"""The systems whose headline experiment ``hadar reproduce NAME`` runs (one module each,
``hadar/experiments/reproduce/<NAME>.py``)."""

HADAR_PAIR = ("hadar", "gavel")
"""Hadar's headline: Hadar against Gavel on the physical mixes (section VI-C)."""

POLLUX_POLICIES = ("pollux", "tiresias")
"""Pollux's headline comparison as its artifact's simulator runs it: Pollux, Tiresias+TunedJobs."""

POLLUX_ARTIFACT_AVG_JCT_S: dict[str, dict[str, float]] = {
    "pollux": {
        "pollux-1": 2089.0,
        "pollux-2": 3323.0,
        "pollux-3": 2188.0,
        "pollux-4": 2721.0,
        "pollux-5": 2674.0,
        "pollux-6": 2446.0,
        "pollux-7": 3616.0,
        "pollux-8": 2952.0,
        "pollux-6-load-0.5": 1288.0,
        "pollux-6-load-1.5": 3474.0,
        "pollux-6-load-2": 5105.0,
    },
    "tiresias": {
        "pollux-1": 2474.0,
        "pollux-2": 5145.0,
        "pollux-3": 3876.0,
        "pollux-4": 3280.0,
        "pollux-5": 3501.0,
        "pollux-6": 3470.0,
        "pollux-7": 5480.0,
        "pollux-8": 5080.0,
    },
}
"""Average JCT (s) of the official Pollux simulator on 16 nodes x 4 T4 (the artifact's
``simulator/results-jobload/<policy>-<load>/summary.json``; workload 6 at load 1.0 is also in its
README, with Optimus+Oracle+TunedJobs at :data:`POLLUX_OPTIMUS_ORACLE_W6_S`)."""

POLLUX_OPTIMUS_ORACLE_W6_S = 5302.0
"""Optimus+Oracle+TunedJobs on workload 6, load 1.0, in the artifact's README (s)."""

OPTIMUS_ORACLE = "optimus"
"""Optimus+Oracle, the third system of Pollux's comparison (``baselines/optimus.py``)."""

AFS_PAIR = ("afs", "tiresias")
"""AFS's headline: AFS-L against Tiresias-L (the AFS paper's Figure 5, length-unaware category)."""

AFS_OVER_TIRESIAS = (1.9, 3.1)
"""Average-JCT speed-up of AFS over Tiresias-L on the AFS paper's traces (section 5, abstract)."""

AFS_CODDL_RESCALE_S = 0.004
"""CoDDL's cost of growing or shrinking a job's share, seconds (AFS paper, section 4: 4 ms)."""

MALLEABLE_SYSTEMS = ("bftrainer", "freetrain", "malletrain")
"""The node-stream replay's systems (``hadar.simulator.malleable``): exact scalability
(BFTrainer), a guessed one (FreeTrain), profiled by JPA (MalleTrain)."""

BFTRAINER_HPO_UTILISATION = 0.80
"""BFTrainer's MILP on HPO over a week of Summit's idle nodes, six-hour windows: resource
utilisation efficiency U = A_e / A_s, 80 % on average (Fig. 10)."""

MALLETRAIN_OVER_FREETRAIN = 1.223
"""MalleTrain's training throughput over FreeTrain's: "up to 22.3 %" (abstract, section 5)."""
