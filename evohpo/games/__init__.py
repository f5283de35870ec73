"""Games of several teams: a population per team, cross-play, schedules and references."""
