package main

// rootCommand returns the command tree. It is built afresh for every
// invocation, so the flag variables captured by each command start empty.
func rootCommand() *command {
	return &command{name: "baton", subs: []*command{
		statusCommand(),
		membersCommand(),
		transferCommand(),
		tenantCommand(),
		principalCommand(),
		taskCommand(),
		queueCommand(),
		artifactCommand(),
		refCommand(),
		kvCommand(),
		checkpointCommand(),
		opCommand(),
		watchCommand(),
		versionCommand(),
	}}
}
