"""The statistics behind the reports, apart from how they are rendered: intervals of a mean and of a
proportion, order-independent sums (:mod:`~ragscale.stats.intervals`), the paired bootstrap, the
permutation test and multiplicity corrections (:mod:`~ragscale.stats.paired`), agreement statistics
(:mod:`~ragscale.stats.agreement`) and prediction-powered estimates (:mod:`~ragscale.stats.ppi`).
Pure functions of numbers: no Ray, no models, no files; docs/statistics.md says what each assumes.
"""
