package main

// x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). Raw
// numbers rather than golang.org/x/sys: the probe must reach calls the
// standard library has no wrapper for, and names stay next to numbers.
const (
	sysClone           = 56
	sysKill            = 62
	sysPtrace          = 101
	sysRtSigqueueinfo  = 129
	sysPersonality     = 135
	sysSetpriority     = 141
	sysSchedSetsched   = 144
	sysPivotRoot       = 155
	sysChroot          = 161
	sysMount           = 165
	sysUmount2         = 166
	sysReboot          = 169
	sysInitModule      = 175
	sysDeleteModule    = 176
	sysTkill           = 200
	sysSchedSetaff     = 203
	sysTgkill          = 234
	sysKexecLoad       = 246
	sysAddKey          = 248
	sysRequestKey      = 249
	sysKeyctl          = 250
	sysIoprioSet       = 251
	sysMigratePages    = 256
	sysUnshare         = 272
	sysMovePages       = 279
	sysPerfEventOpen   = 298
	sysPrlimit64       = 302
	sysNameToHandleAt  = 303
	sysOpenByHandleAt  = 304
	sysSetns           = 308
	sysProcessVMReadv  = 310
	sysProcessVMWritev = 311
	sysKcmp            = 312
	sysFinitModule     = 313
	sysKexecFileLoad   = 320
	sysBpf             = 321
	sysUserfaultfd     = 323
	sysPidfdSendSignal = 424
	sysIoUringSetup    = 425
	sysIoUringEnter    = 426
	sysIoUringRegister = 427
	sysOpenTree        = 428
	sysMoveMount       = 429
	sysFsopen          = 430
	sysFsconfig        = 431
	sysFsmount         = 432
	sysFspick          = 433
	sysPidfdOpen       = 434
	sysClone3          = 435
	sysPidfdGetfd      = 438
	sysProcessMadvise  = 440
	sysMountSetattr    = 442
	sysStatmount       = 457
	sysListmount       = 458
	sysExitGroup       = 231
)
