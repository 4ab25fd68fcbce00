"""The job archive's details step: a service job's team and instances, once per job."""
