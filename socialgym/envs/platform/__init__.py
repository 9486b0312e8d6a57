"""The platform as an agent: the recommender's seat (``env``), its scripted users (``users``) and
the PettingZoo form with a platform agent beside the users (``agent``)."""
