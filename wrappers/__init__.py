"""What wraps gymenvs environments for their consumers: vectorisation and the TRL bridge."""
