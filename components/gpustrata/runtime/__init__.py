"""Running Pulumi programs: the project's program, the mock runner behind ``gpustrata plan``,
the component provider, and Ray's own placement check."""
