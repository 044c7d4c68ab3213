/*
 * run_ns.c - `softrnic run`: the device identity that middleware looks for
 * outside the verbs API, in a private mount namespace.
 *
 * UCX (and libfabric, and rdma-core's own tools) do not trust
 * ibv_get_device_list alone. UCX 1.13 keeps a verbs device only when
 * /dev/infiniband/<ibv_device.dev_name> is a character device it may read
 * and write (uct_ib_device_is_accessible: stat + S_ISCHR + access R_OK|W_OK;
 * it never opens it), and reads the RoCE version of each GID from
 * /sys/class/infiniband/<name>/ports/1/gid_attrs/types/<index> (absent:
 * RoCE v1), the netdev from .../gid_attrs/ndevs/<index>, the NUMA node from
 * .../device/numa_node. None of these exist without a kernel driver, and an
 * ordinary user can create neither a character device nor a sysfs file.
 *
 * So `run` gives PROG its own view of two directories, and nothing else:
 *
 *   unshare(CLONE_NEWNS) when we may (root), else a user namespace with
 *   the caller's uid and gid mapped to themselves (files PROG creates stay
 *   the caller's, getuid() is unchanged, no capability survives the
 *   execve), one per user and shared by all their runs (join_user_ns), and
 *   a mount namespace of this run's own in it;
 *   /dev and /sys/class: a tmpfs over each, refilled with every original
 *   entry (directories and files bind-mounted recursively from the covered
 *   directory, symlinks copied), so /dev/shm, /dev/pts, /sys/class/net ...
 *   are the same mounts as outside; then
 *   /dev/infiniband/uverbsN: a bind mount of /dev/null (a real character
 *   device, mode 0666; nothing is written through it by softrnic), and
 *   /sys/class/infiniband/<name>, /sys/class/infiniband_verbs/uverbsN:
 *   small read-only files generated from the device list;
 *   finally both tmpfs are remounted read-only.
 *
 * The network, PID and IPC namespaces are untouched: the sockets, the
 * /dev/shm rings between processes and the diagnostic files read by
 * `softrnic stat` outside are exactly as without the namespace. Where a
 * namespace cannot be made (user namespaces disabled, seccomp), `run` says
 * so on stderr and runs PROG without the view.
 *
 * A run that finds every device's node and sysfs directory in place (a
 * run inside a run, or root's system-wide setup) changes nothing.
 *
 * Invariants: every mount is made after the unshare, in the new namespace,
 * so nothing leaks to the caller's; propagation is MS_SLAVE, so mounts the
 * host makes later still show inside.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "core/limits.h"
#include "link/config.h"
#include "link/rundir.h"
#include "wire/roce_hdr.h"
#include "run_ns.h"

/* Real sysfs writes a uverbs ABI of 6 in infiniband_verbs/abi_version and a
 * per-device ABI of 1 (rdma-core's IB_USER_VERBS_ABI_VERSION window). */
#define NS_UVERBS_ABI "6"

static int write_file_at(int dirfd, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int write_file_at(int dirfd, const char *name, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -EOVERFLOW;
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, buf, (size_t)n);
	int ret = w == n ? 0 : (w < 0 ? -errno : -EIO);
	close(fd);
	return ret;
}

static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = (ssize_t)strlen(text);
	int ret = write(fd, text, (size_t)n) == n ? 0 : -errno;
	close(fd);
	return ret;
}

/* mkdir -p of a relative path under dirfd; returns an O_PATH-free fd of it. */
static int mkdirs_at(int dirfd, const char *rel)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s", rel) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	for (char *p = path; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdirat(dirfd, path, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdirat(dirfd, path, 0755) && errno != EEXIST)
		return -errno;
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int bind_entry(int oldfd, const char *name, const char *target)
{
	char src[64 + NAME_MAX];
	snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", oldfd, name);
	/* Recursive: a mount with locked children (all of them, in a user
	 * namespace) may only be bound with its children. */
	return mount(src, target, NULL, MS_BIND | MS_REC, NULL) ? -errno : 0;
}

static bool skip_name(const char *name, const char *const *skip)
{
	for (; skip && *skip; skip++)
		if (!strcmp(name, *skip))
			return true;
	return false;
}

/*
 * Cover dir with a tmpfs holding every entry it had (but those in skip):
 * directories and files bind-mounted from the covered directory, symlinks
 * copied. Returns an fd of the new, still writable, directory or -errno;
 * *oldfd_out (if not NULL) keeps the covered directory open.
 */
static int cover_dir(const char *dir, const char *const *skip, int *oldfd_out,
		     char *err, size_t errlen)
{
	int oldfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (oldfd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
		return -errno;
	}
	int ret;
	if (mount("softrnic", dir, "tmpfs", MS_NOSUID, "mode=0755,size=1m")) {
		ret = -errno;
		snprintf(err, errlen, "cannot mount a tmpfs on %s: %s", dir, strerror(errno));
		close(oldfd);
		return ret;
	}
	int newfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fdopendir(dup(oldfd));
	if (newfd < 0 || !d) {
		ret = -errno;
		snprintf(err, errlen, "cannot list %s: %s", dir, strerror(errno));
		goto fail;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") || skip_name(n, skip))
			continue;
		struct stat st;
		char target[PATH_MAX], link[PATH_MAX];
		if (fstatat(oldfd, n, &st, AT_SYMLINK_NOFOLLOW))
			continue;  /* gone meanwhile */
		snprintf(target, sizeof(target), "%s/%s", dir, n);
		if (S_ISLNK(st.st_mode)) {
			ssize_t len = readlinkat(oldfd, n, link, sizeof(link) - 1);
			if (len < 0)
				continue;
			link[len] = '\0';
			ret = symlinkat(link, newfd, n) ? -errno : 0;
		} else if (S_ISDIR(st.st_mode)) {
			ret = mkdirat(newfd, n, st.st_mode & 07777) ? -errno : 0;
			if (!ret)
				ret = bind_entry(oldfd, n, target);
		} else {
			int fd = openat(newfd, n, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			ret = fd < 0 ? -errno : 0;
			if (fd >= 0)
				close(fd);
			if (!ret)
				ret = bind_entry(oldfd, n, target);
		}
		if (ret) {
			/* A missing entry could break PROG in ways far from
			 * here: give up on the whole view instead. */
			snprintf(err, errlen, "cannot recreate %.200s: %s", target, strerror(-ret));
			goto fail;
		}
	}
	closedir(d);
	if (oldfd_out)
		*oldfd_out = oldfd;
	else
		close(oldfd);
	return newfd;
fail:
	if (d)
		closedir(d);
	if (newfd >= 0)
		close(newfd);
	close(oldfd);
	umount2(dir, MNT_DETACH);  /* back to the directory as it was */
	return ret;
}

static int seal_dir(const char *dir, char *err, size_t errlen)
{
	if (mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL)) {
		snprintf(err, errlen, "cannot make %s read-only: %s", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

/* /sys/class/infiniband/<name>: what rdma-core's sysfs has for a RoCE
 * device, as far as UCX, libfabric and the rdma tools read it. Values
 * agree with ibv_query_device/ibv_query_port (core/device.c). */
/* The RoCEv2 GID of a configured address (IPv4-mapped for IPv4), as
 * sysfs writes GIDs: eight groups of four hex digits. */
static void gid_text(const struct srn_dev_cfg *c, char *out, size_t len)
{
	uint8_t g[16] = { [10] = 0xff, [11] = 0xff };
	if (c->family == AF_INET)
		memcpy(g + 12, &((const struct sockaddr_in *)&c->addr)->sin_addr, 4);
	else
		memcpy(g, &((const struct sockaddr_in6 *)&c->addr)->sin6_addr, 16);
	size_t n = 0;
	for (int i = 0; i < 16; i += 2)
		n += (size_t)snprintf(out + n, len - n, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
}

/* <ibdev>/device: no PCI function behind it, and the netdev that carries
 * the address.  0 or -errno. */
static int gen_device_dir(int dfd, const char *ifname)
{
	int sub = mkdirs_at(dfd, "device");
	if (sub < 0)
		return sub;
	/* No PCI function behind it: no NUMA affinity, as sysfs says for a
	 * virtual device. */
	int ret = write_file_at(sub, "numa_node", "-1\n");
	/* device/net/<ifname>: the netdev that carries the address (auto:
	 * loopback), as rdma-core's ibdev2netdev reads it. */
	int net = !ret && ifname[0] ? mkdirs_at(sub, "net") : -ENOENT;
	if (net >= 0) {
		char link[PATH_MAX];
		snprintf(link, sizeof(link), "/sys/class/net/%s", ifname);
		ret = symlinkat(link, net, ifname) ? -errno : 0;
		close(net);
	}
	close(sub);
	return ret;
}

/* ports/1/{gid_attrs/types,gid_attrs/ndevs,gids}: every entry of the GID
 * table RoCE v2, on ifname, with gid when the address is known now. */
static int gen_gid_table(int sub, const char *ifname, const char *gid)
{
	int ret = 0;
	int t = mkdirs_at(sub, "gid_attrs/types");
	int nd = t < 0 ? t : mkdirs_at(sub, "gid_attrs/ndevs");
	int gd = nd < 0 ? nd : mkdirs_at(sub, "gids");
	for (int i = 0; gd >= 0 && !ret && i < SRN_GID_TBL_LEN; i++) {
		char n[16];
		snprintf(n, sizeof(n), "%d", i);
		ret = write_file_at(t, n, "RoCE v2\n");
		if (!ret && ifname[0])
			ret = write_file_at(nd, n, "%s\n", ifname);
		/* An auto address is picked when the device opens. */
		if (!ret && gid[0])
			ret = write_file_at(gd, n, "%s\n", gid);
	}
	if (t >= 0)
		close(t);
	if (nd >= 0)
		close(nd);
	if (gd >= 0)
		close(gd);
	return ret ? ret : gd < 0 ? gd : 0;
}

/* <ibdev>/ports/1, as srn_port_query describes the port.  0 or -errno. */
static int gen_port_dir(int dfd, const char *ifname, const char *gid)
{
	int sub = mkdirs_at(dfd, "ports/1");
	if (sub < 0)
		return sub;
	/* 4X EDR (active_width 2, active_speed 32 in srn_port_query). */
	int ret = write_file_at(sub, "rate", "100 Gb/sec (4X EDR)\n");
	ret = ret ? ret : write_file_at(sub, "state", "4: ACTIVE\n");
	ret = ret ? ret : write_file_at(sub, "phys_state", "5: LinkUp\n");
	ret = ret ? ret : write_file_at(sub, "link_layer", "Ethernet\n");
	ret = ret ? ret : write_file_at(sub, "lid", "0x0\n");
	ret = ret ? ret : write_file_at(sub, "sm_lid", "0x0\n");
	ret = ret ? ret : write_file_at(sub, "lid_mask_count", "0\n");
	/* IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS */
	ret = ret ? ret : write_file_at(sub, "cap_mask", "0x%08x\n",
					IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS);
	ret = ret ? ret : gen_gid_table(sub, ifname, gid);
	int p = ret ? ret : mkdirs_at(sub, "pkeys");
	if (p >= 0) {
		ret = write_file_at(p, "0", "0x%04x\n", SRN_DEFAULT_PKEY);
		close(p);
	} else if (!ret) {
		ret = p;
	}
	close(sub);
	return ret;
}

static int gen_ibdev(int classfd, struct ibv_device *dev, const struct srn_dev_cfg *cfg)
{
	char rel[PATH_MAX];
	uint64_t g = be64toh(ibv_get_device_guid(dev));
	char guid[32];
	snprintf(guid, sizeof(guid), "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff,
		 (unsigned)g & 0xffff);
	char ifname[IF_NAMESIZE] = "", gid[48] = "";
	if (cfg && srn_link_ifname((const struct sockaddr *)&cfg->addr, ifname))
		ifname[0] = '\0';
	if (cfg && !cfg->auto_loopback)
		gid_text(cfg, gid, sizeof(gid));
	snprintf(rel, sizeof(rel), "infiniband/%s", dev->name);
	int dfd = mkdirs_at(classfd, rel);
	if (dfd < 0)
		return dfd;
	int ret = write_file_at(dfd, "node_type", "1: CA\n");
	ret = ret ? ret : write_file_at(dfd, "node_guid", "%s\n", guid);
	ret = ret ? ret : write_file_at(dfd, "sys_image_guid", "%s\n", guid);
	ret = ret ? ret : write_file_at(dfd, "node_desc", "softrnic %s\n", dev->name);
	ret = ret ? ret : write_file_at(dfd, "hca_type", "softrnic\n");
	ret = ret ? ret : gen_device_dir(dfd, ifname);
	ret = ret ? ret : gen_port_dir(dfd, ifname, gid);
	close(dfd);
	if (ret)
		return ret;

	snprintf(rel, sizeof(rel), "infiniband_verbs/%s", dev->dev_name);
	dfd = mkdirs_at(classfd, rel);
	if (dfd < 0)
		return dfd;
	ret = write_file_at(dfd, "ibdev", "%s\n", dev->name);
	ret = ret ? ret : write_file_at(dfd, "abi_version", "1\n");
	close(dfd);
	return ret;
}

/* Root's directories look like nobody's from inside the user namespace:
 * name a root-owned diagnostics directory (default /dev/shm), checked
 * here outside, so the library may still use it (diag/seg_file.c). */
static void vouch_diag_dir(void)
{
	const char *dir = getenv("SOFTRNIC_DIAG_DIR");
	struct stat st;
	char v[64];
	if (stat(dir && *dir ? dir : "/dev/shm", &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0)
		return;
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("SOFTRNIC_DIAG_DIR_ROOT", v, 1);
}

/*
 * One user namespace per user, shared by all of that user's `run`s.
 *
 * Two processes in sibling user namespaces may not look into each other
 * (the kernel's ptrace check, cap_ptrace_access_check, wants the same
 * namespace or CAP_SYS_PTRACE over the other): the same-host link, which
 * opens its peer's inbox memfd through /proc/PID/fd, would fall back to
 * UDP. So the first `run` anchors its namespace in a marker ("userns":
 * "pid ns-inode", ours, 0600) in the user's run directory
 * (link/rundir.h: /dev/shm/softrnic-run-<uid>/, 0700, or a fallback when
 * another user took that name: a marker in /dev/shm itself could be
 * squatted, and every run then got a namespace of its own), and later
 * ones join it with setns, which its owner may do from outside. Each
 * then makes its own mount namespace. A marker whose process is gone, or
 * whose namespace is not that process's any more, is replaced.
 */
#define NS_MARKER "userns"

/* The run directory, or -1; its fallback (or none) said once. */
static int marker_dir(void)
{
	static bool said;
	const struct srn_rundir *d = srn_rundir_get(SRN_RUNDIR_RUN);
	if (d->note[0] && !said) {
		said = true;
		fprintf(stderr, "softrnic run: warning: %s\n", d->note);
	}
	return d->fd;
}

static int join_user_ns(uid_t uid)
{
	char path[64], buf[64];
	int dfd = marker_dir();
	if (dfd < 0)
		return -EPERM;
	int fd = openat(dfd, NS_MARKER, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	ssize_t n = -1;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == uid &&
	    (st.st_mode & 07777) == 0600)
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	int pid;
	unsigned long long ino;
	if (n <= 0)
		return -EINVAL;
	buf[n] = '\0';
	if (sscanf(buf, "%d %llu", &pid, &ino) != 2 || pid <= 0)
		return -EINVAL;
	/* The namespace must still be that process's, and the process
	 * ours: a recycled pid fails one or the other. */
	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char dir[32];
	struct stat pst;
	snprintf(dir, sizeof(dir), "/proc/%d", pid);
	int ret = fstat(fd, &st) || stat(dir, &pst) ? -errno : 0;
	if (!ret && ((unsigned long long)st.st_ino != ino || pst.st_uid != uid))
		ret = -ESTALE;
	/* Our gid must be mapped there too (a run under another primary
	 * group could not create files otherwise). */
	char map[80];
	unsigned in, out, cnt;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	FILE *f = ret ? NULL : fopen(path, "re");
	if (!ret && (!f || !fgets(map, sizeof(map), f) ||
		     sscanf(map, "%u %u %u", &in, &out, &cnt) != 3 || in != getgid() ||
		     out != getgid() || cnt != 1))
		ret = -ESTALE;
	if (f)
		fclose(f);
	if (!ret && setns(fd, CLONE_NEWUSER))
		ret = -errno;
	close(fd);
	return ret;
}

static void anchor_user_ns(void)
{
	char tmp[32], text[64];
	struct stat st;
	int dfd = marker_dir();
	if (dfd < 0 || stat("/proc/self/ns/user", &st))
		return;
	snprintf(tmp, sizeof(tmp), NS_MARKER ".%d", (int)getpid());
	int n = snprintf(text, sizeof(text), "%d %llu\n", (int)getpid(),
			 (unsigned long long)st.st_ino);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	bool ok = write(fd, text, (size_t)n) == n;
	close(fd);
	/* The directory is ours alone: the rename cannot meet another's file. */
	if (!ok || renameat(dfd, tmp, dfd, NS_MARKER))
		unlinkat(dfd, tmp, 0);
}

static int make_namespace(char *err, size_t errlen)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(CLONE_NEWNS) == 0)
		goto mounts;
	if (errno != EPERM) {
		snprintf(err, errlen, "unshare(CLONE_NEWNS): %s", strerror(errno));
		return -errno;
	}
	/* Inside, every unmapped owner (root's /dev/shm, other users'
	 * files) shows as the overflow uid: a caller who is that uid could
	 * no longer tell those files from its own. */
	long overflow = 65534;
	FILE *f = fopen("/proc/sys/kernel/overflowuid", "re");
	if (f) {
		if (fscanf(f, "%ld", &overflow) != 1)
			overflow = 65534;
		fclose(f);
	}
	if ((long)uid == overflow) {
		snprintf(err, errlen, "uid %u is the kernel's overflow uid: inside a user "
			 "namespace it could not tell other users' files from its own",
			 (unsigned)uid);
		return -EPERM;
	}
	vouch_diag_dir();
	if (join_user_ns(uid) == 0) {
		if (unshare(CLONE_NEWNS)) {
			snprintf(err, errlen, "unshare(CLONE_NEWNS) in the shared user namespace: %s",
				 strerror(errno));
			return -errno;
		}
		goto mounts;
	}
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS)) {
		snprintf(err, errlen, "cannot create a user namespace: %s%s", strerror(errno),
			 errno == EPERM || errno == ENOSPC ?
				 " (disabled here: see kernel.unprivileged_userns_clone, "
				 "user.max_user_namespaces, or the container's seccomp policy)" : "");
		return -errno;
	}
	char map[64];
	int ret = write_proc("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	ret = ret ? ret : write_proc("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	ret = ret ? ret : write_proc("/proc/self/gid_map", map);
	if (ret) {
		snprintf(err, errlen, "cannot map uid %u in the user namespace: %s",
			 (unsigned)uid, strerror(-ret));
		return ret;
	}
	anchor_user_ns();
mounts:
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL)) {
		snprintf(err, errlen, "cannot make mounts private: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* Every device already has its node and sysfs directory: a `run` inside
 * another's view, or a system-wide setup by root. Nothing to do. */
static bool view_present(struct ibv_device **list, int ndev)
{
	for (int i = 0; i < ndev; i++) {
		char p[PATH_MAX];
		struct stat st;
		snprintf(p, sizeof(p), "/dev/infiniband/%s", list[i]->dev_name);
		if (stat(p, &st) || !S_ISCHR(st.st_mode))
			return false;
		snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/1/gid_attrs/types/0",
			 list[i]->name);
		if (access(p, R_OK))
			return false;
	}
	return ndev > 0;
}

static int build_view(char *err, size_t errlen)
{
	int ret, ndev = 0;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	if (!list) {
		snprintf(err, errlen, "no device list: %s", strerror(errno));
		return -errno;
	}
	if (view_present(list, ndev)) {
		ret = 0;
		goto out;
	}
	/* The library numbers devices in configuration order; a
	 * configuration it would refuse leaves the files it feeds empty. */
	struct srn_dev_cfg cfg[SRN_MAX_DEVICES];
	char cfgerr[256];
	int ncfg = srn_config_load(cfg, SRN_MAX_DEVICES, cfgerr, sizeof(cfgerr));
	if (ncfg != ndev)
		ncfg = 0;
	ret = make_namespace(err, errlen);
	if (ret)
		goto out;

	/* /dev: our infiniband/ replaces any real one (PROG sees only
	 * softrnic devices through this libibverbs anyway). */
	static const char *const dev_skip[] = { "infiniband", NULL };
	int olddev = -1;
	int devfd = cover_dir("/dev", dev_skip, &olddev, err, errlen);
	if (devfd < 0) {
		ret = devfd;
		goto out;
	}
	int ibfd = mkdirs_at(devfd, "infiniband");
	ret = ibfd < 0 ? ibfd : 0;
	for (int i = 0; !ret && i < ndev; i++) {
		char target[PATH_MAX];
		snprintf(target, sizeof(target), "/dev/infiniband/%s", list[i]->dev_name);
		int fd = openat(ibfd, list[i]->dev_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				0600);
		ret = fd < 0 ? -errno : 0;
		if (fd >= 0)
			close(fd);
		ret = ret ? ret : bind_entry(olddev, "null", target);
		if (ret)
			snprintf(err, errlen, "cannot create %.200s: %s", target, strerror(-ret));
	}
	if (ibfd >= 0)
		close(ibfd);
	close(olddev);
	close(devfd);
	if (ret || (ret = seal_dir("/dev", err, errlen)))
		goto out;

	static const char *const sys_skip[] = { "infiniband", "infiniband_verbs", NULL };
	int classfd = cover_dir("/sys/class", sys_skip, NULL, err, errlen);
	if (classfd < 0) {
		ret = classfd;
		goto out;
	}
	int vfd = mkdirs_at(classfd, "infiniband_verbs");
	ret = vfd < 0 ? vfd : write_file_at(vfd, "abi_version", NS_UVERBS_ABI "\n");
	if (vfd >= 0)
		close(vfd);
	int ifd = ret ? ret : mkdirs_at(classfd, "infiniband");
	if (ifd >= 0)
		close(ifd);
	else if (!ret)
		ret = ifd;
	for (int i = 0; !ret && i < ndev; i++)
		ret = gen_ibdev(classfd, list[i], i < ncfg ? &cfg[i] : NULL);
	if (ret)
		snprintf(err, errlen, "cannot write /sys/class/infiniband: %s", strerror(-ret));
	close(classfd);
	if (!ret)
		ret = seal_dir("/sys/class", err, errlen);
out:
	ibv_free_device_list(list);
	return ret;
}

int srn_run_ns_setup(void)
{
	char err[512] = "";
	int ret = build_view(err, sizeof(err));
	if (ret)
		fprintf(stderr,
			"softrnic run: warning: no /dev/infiniband and /sys/class/infiniband "
			"view for the program: %s\n"
			"  programs that check them (UCX, libfabric) will not see softrnic "
			"devices; --no-sysfs turns this off\n", err);
	return ret;
}
