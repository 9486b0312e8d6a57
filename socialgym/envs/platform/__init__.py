"""The platform as an agent: the recommender's seat (``env``), its scripted users (``users``), the
PettingZoo form with a platform agent beside the users (``agent``) and the check of the
platform's actions against their space (``actions``)."""
