"""Reading runs back: the HTML report, paired comparisons with intervals, policy evaluation,
the discussion statistics, and the figures (``plotting``)."""
