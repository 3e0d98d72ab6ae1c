package cmd

import (
	"fmt"
	"strings"
	"time"

	"mdtool/internal/daemon"
)

// syncWords are the words for a running sync action: /proc/mdstat's
// ("recovery", "resync", "check", "reshape"), detail's State suffix and its
// "%7s Status" title. md shows a repair as a resync: only check sets
// MD_RECOVERY_CHECK.
func syncWords(action string) (mdstat, state, title string, ok bool) {
	switch action {
	case "recover":
		return "recovery", "recovering", "Rebuild", true
	case "resync", "repair":
		return "resync", "resyncing", "Resync", true
	case "check":
		return "check", "checking", "Check", true
	case "reshape":
		return "reshape", "reshaping", "Reshape", true
	}
	return "", "", "", false
}

// syncRunning reports whether st has progress to show (mdstat prints a
// progress line).
func syncRunning(st *daemon.Status) bool {
	_, _, _, ok := syncWords(st.SyncAction)
	return ok && st.SyncTotal > 0
}

// perMille is md's status_resync: (done>>scale)*1000 / ((total>>scale)+1)
// with scale 10.
func perMille(done, total uint64) uint64 {
	if done > total {
		done = total
	}
	return (done >> 10) * 1000 / ((total >> 10) + 1)
}

// syncFinish is status_resync's estimate of the remaining time in seconds
// from the speed over the last second (db sectors in dt = 1 s).
func syncFinish(done, total, speedKBps uint64) uint64 {
	if done > total {
		done = total
	}
	db := speedKBps * 2
	rt := (total - done) / (db/32 + 1)
	return rt >> 5
}

// progressLine is the line /proc/mdstat prints under an array while a sync
// runs, e.g.
//
//	[====>................]  recovery = 22.1% (14532/65472) finish=0.4min speed=2000K/sec
func progressLine(st *daemon.Status) string {
	word, _, _, _ := syncWords(st.SyncAction)
	pm := perMille(st.SyncDone, st.SyncTotal)
	x := int(pm / 50)
	var b strings.Builder
	b.WriteString("[")
	b.WriteString(strings.Repeat("=", x))
	b.WriteString(">")
	b.WriteString(strings.Repeat(".", 20-x))
	b.WriteString("] ")
	done := min(st.SyncDone, st.SyncTotal)
	fmt.Fprintf(&b, " %s =%3d.%d%% (%d/%d)", word, pm/10, pm%10, done/2, st.SyncTotal/2)
	rt := syncFinish(st.SyncDone, st.SyncTotal, st.SyncSpeed)
	fmt.Fprintf(&b, " finish=%d.%dmin", rt/60, (rt%60)/6)
	fmt.Fprintf(&b, " speed=%dK/sec", st.SyncSpeed)
	return b.String()
}

// detailJSONSync is the "sync" object of detail --json.
type detailJSONSync struct {
	// Action is md's sync_action (idle, resync, recover, check, repair,
	// frozen); Status the title detail prints ("Rebuild", "Resync",
	// "Check") while it runs.
	Action string `json:"action"`
	Status string `json:"status,omitempty"`
	// DoneSectors and TotalSectors are md's sync_completed.
	DoneSectors  uint64 `json:"done_sectors"`
	TotalSectors uint64 `json:"total_sectors"`
	// Percent is /proc/mdstat's percentage (one decimal); Complete is
	// detail's "N% complete".
	Percent  float64 `json:"percent"`
	Complete int     `json:"complete"`
	// SpeedKiBps is md's sync_speed; FinishSeconds /proc/mdstat's
	// estimate of the time left.
	SpeedKiBps    uint64 `json:"speed_kib_per_second"`
	FinishSeconds uint64 `json:"finish_seconds"`
	// Progress is /proc/mdstat's progress line.
	Progress string `json:"progress,omitempty"`
	Started  string `json:"started,omitempty"`
	// LastAction is md's last_sync_action, Mismatches its mismatch_cnt.
	LastAction string `json:"last_action,omitempty"`
	Mismatches uint64 `json:"mismatch_cnt"`
	// WrittenSectors: member sectors the running or last action wrote;
	// CheckpointSectors: the last recorded resync/recovery position.
	WrittenSectors    uint64 `json:"written_sectors"`
	CheckpointSectors uint64 `json:"checkpoint_sectors"`
	// SpeedMin and SpeedMax are sync_speed_min and sync_speed_max.
	SpeedMin uint64 `json:"speed_min_kib_per_second"`
	SpeedMax uint64 `json:"speed_max_kib_per_second"`
}

func syncJSON(st *daemon.Status) detailJSONSync {
	j := detailJSONSync{Action: st.SyncAction, LastAction: st.LastSyncAction, Mismatches: st.Mismatches,
		WrittenSectors: st.SyncWritten, CheckpointSectors: st.SyncCheckpoint,
		SpeedMin: st.SyncSpeedMin, SpeedMax: st.SyncSpeedMax}
	if j.Action == "" {
		j.Action = "idle"
	}
	if !st.SyncStarted.IsZero() {
		j.Started = st.SyncStarted.UTC().Format(time.RFC3339)
	}
	if syncRunning(st) {
		_, _, title, _ := syncWords(st.SyncAction)
		pm := perMille(st.SyncDone, st.SyncTotal)
		j.Status = title
		j.DoneSectors, j.TotalSectors = min(st.SyncDone, st.SyncTotal), st.SyncTotal
		j.Percent = float64(pm) / 10
		j.Complete = int(pm / 10)
		j.SpeedKiBps = st.SyncSpeed
		j.FinishSeconds = syncFinish(st.SyncDone, st.SyncTotal, st.SyncSpeed)
		j.Progress = progressLine(st)
	}
	return j
}
