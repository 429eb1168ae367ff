// Package config holds baton's job list: the YAML file that every replica reads,
// its Go types, and the rules that decide whether a file is acceptable.
//
// Every replica of a baton cluster loads the same file, so a config is all or
// nothing: Load and LoadFile start from documented defaults, expand ${VAR} and
// ${VAR:-default} from the environment in scalar values, reject unknown keys,
// validate every value (cron specs are parsed, time zones loaded, Redis URLs
// checked, cross-field rules such as "singleton jobs have no schedule"
// applied) and return either a complete *Config or an *Error that lists
// every problem with its file, line and job. Nothing is half-applied.
//
// A Job says when it runs (Schedule, in Location), where (Mode: through the
// asynq queue, in-process on the scheduler replica that won the tick, or as a
// long-running singleton), what it runs (exactly one of Exec, HTTP or
// Handler) and how executions meet each other (Concurrency, Catchup, retries
// and timeouts). Zone data is embedded (time/tzdata) so that every replica
// computes the same ticks whatever its host has installed.
//
// # Exported names
//
// Loading: [Load], [LoadFile] and [LoadConnectionFile] return a [Config] or
// an [Error] of [FieldError] values; [MaxFileSize] bounds a file.
//
// The file's sections: [RedisConfig] (with [SentinelConfig],
// [ClusterConfig] and [TLSFiles]), [LockingConfig], [SchedulerConfig],
// [WorkerConfig] ([ExecCgroupAuto], [ExecCgroupOff]), [HTTPConfig],
// [HistoryConfig], [SchedulesConfig], [SecurityConfig]; their limits
// [MaxShards], [MinHTTPToken], [MinSigningKey] and [FollowerDelay].
//
// A [Job]: its [Mode] (cron, local, singleton), what it runs ([ExecSpec],
// [HTTPSpec] or [HandlerSpec]), its [Concurrency], its [Catchup] policy
// ([CatchupSkip], [CatchupLatest], [CatchupAll]), its [DST] policy, the
// calendars it excludes or runs only on (a [CalendarSpec] each, by name;
// [Config.ExcludedBy] says why a tick is left out), the limit it runs
// within (at most [MaxLimit] runs at once), the jobs it runs after (a
// chain: its [ParentFailure] policy, [ParentFailureSkip] or
// [ParentFailureRun]; it waits [DefaultChainWait] by default) and a
// singleton's restart [Backoff].
//
// Runtime schedules, jobs kept in Redis beside the list ([JobSource]; a
// [ChildSource] also knows which of them run after a job):
// [DecodeSchedule] checks a definition, [ScheduleDocument] stores it and
// [MaskScheduleDocument] shows it; [MaxScheduleDocument] bounds it, a
// [ScheduleRef] ([ParseScheduleRef]) names one of its versions.
// [CheckScheduleID], [ScheduleJobName], [ScheduleID] and [IsScheduleJob]
// go between an id and its job's name; [ScheduleShard] and [ScheduleKeys]
// find where it is kept. Calendars put at runtime: [CheckCalendarName]
// checks a name, [DecodeCalendar] a definition ([MaxCalendarDocument]
// bounds it); [ScheduleCalendars] are the calendars a schedule names.
package config
