package main

// commandTree returns the commands under "baton". It is built afresh for
// every invocation, so the flag variables captured by each command start
// empty.
func commandTree() []*command {
	return []*command{
		statusCommand(),
		membersCommand(),
		transferCommand(),
		backupCommand(),
		tenantCommand(),
		principalCommand(),
		taskCommand(),
		queueCommand(),
		artifactCommand(),
		refCommand(),
		kvCommand(),
		checkpointCommand(),
		opCommand(),
		waitpointCommand(),
		scheduleCommand(),
		watchCommand(),
		mcpCommand(),
		versionCommand(),
	}
}

// Aliases of the verbs, the same in every group: list is also ls, delete
// is also rm. The verbs of older releases (del, set, revoke, remove) stay
// as aliases so that scripts keep working.
var (
	listAliases   = []string{"ls"}
	deleteAliases = []string{"rm", "del"}
)
