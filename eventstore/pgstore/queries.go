package pgstore

// queries are the statements, with the table names expanded once by New.
type queries struct {
	fenceRow, createWorkflow, lockWorkflow, loadRuns, stagedKeys            string
	insertEvents, upsertRuns, updateWorkflow, stageRows, settleActivities   string
	readFrom, runChain, listIDs, listActive, listPaused, streamHeads, query string
	scheduleTimer, retireTimer, expiredTimers                               string
	packageLock, putPackage, putRoutes, listPackages, listRoutes            string
	packageDeps, deletePackage, hashStored                                  string
	claim, countClaimed, lockKeys, rearm, cancelRow, cancelWorkflow         string
	newLife, leaseRead, lockTake, lockKeep, grant                           string
	isOwner, publish, renew, release, leases, claimOwned                    string
	pruneClosed, readMany                                                   string
}

func newQueries(n names) queries {
	return queries{
		fenceRow: n.sql(qFenceRow), createWorkflow: n.sql(qCreateWorkflow), lockWorkflow: n.sql(qLockWorkflow),
		loadRuns: n.sql(qLoadRuns), stagedKeys: n.sql(qStagedKeys),
		insertEvents: n.sql(qInsertEvents), upsertRuns: n.sql(qUpsertRuns), updateWorkflow: n.sql(qUpdateWorkflow),
		stageRows: n.sql(qStageRows), settleActivities: n.sql(qSettleActivities),
		readFrom: n.sql(qReadFrom), runChain: n.sql(qRunChain), listIDs: n.sql(qListIDs), listActive: n.sql(qListActive),
		listPaused: n.sql(qListPaused), streamHeads: n.sql(qStreamHeads), query: n.sql(qQuery),
		scheduleTimer: n.sql(qScheduleTimer), retireTimer: n.sql(qRetireTimer), expiredTimers: n.sql(qExpiredTimers),
		packageLock: qPackageLock, putPackage: n.sql(qPutPackage), putRoutes: n.sql(qPutRoutes),
		listPackages: n.sql(qListPackages), listRoutes: n.sql(qListRoutes), packageDeps: n.sql(qPackageDeps),
		deletePackage: n.sql(qDeletePackage), hashStored: n.sql(qHashStored),
		claim: n.sql(qClaim), countClaimed: n.sql(qCountClaimed), lockKeys: n.sql(qLockKeys), rearm: n.sql(qRearm),
		cancelRow: n.sql(qCancelRow), cancelWorkflow: n.sql(qCancelWorkflow),
		newLife: n.sql(qNewLife), leaseRead: n.sql(qLeaseRead), lockTake: n.sql(qLockTake), lockKeep: n.sql(qLockKeep),
		grant: n.sql(qGrant), isOwner: n.sql(qIsOwner), publish: n.sql(qPublish), claimOwned: n.sql(qClaimOwned),
		renew: n.sql(qRenew), release: n.sql(qRelease), leases: n.sql(qLeases),
		pruneClosed: n.sql(qPruneClosed), readMany: n.sql(qReadMany),
	}
}
