package netns

// sysSetns is setns(2)'s number, which package syscall does not name.
const sysSetns = 268
