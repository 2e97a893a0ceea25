package objstore

// DirError is dirError, for the mapping test.
var DirError = dirError

// ParseS3 is parseS3, for the environment test.
var ParseS3 = parseS3
