package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestDependencyOnOtherTenantsTask: task ids are per tenant, so a
// depends_on naming a task that exists only in another tenant is a
// missing dependency: 400, nothing written in either tenant.
func TestDependencyOnOtherTenantsTask(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	theirs := fx.mustTask(t, "POST", "/v1/tenants/other/tasks", `{"task_id":"theirs","queue":"up"}`, adm, http.StatusCreated)
	status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"mine","queue":"down","depends_on":["theirs"]}`, adm)
	if status != http.StatusBadRequest || !strings.Contains(string(resp), `depends_on names task \"theirs\", which does not exist`) {
		t.Fatalf("depends_on another tenant's task: %d %s, want 400 invalid_argument", status, resp)
	}
	fx.mustTask(t, "GET", "/v1/tenants/acme/tasks/mine", "", adm, http.StatusNotFound)
	fx.mustTask(t, "GET", "/v1/tenants/acme/tasks/theirs", "", adm, http.StatusNotFound)
	if got := fx.mustTask(t, "GET", "/v1/tenants/other/tasks/theirs", "", adm, http.StatusOK); got.Version != theirs.Version {
		t.Fatalf("the other tenant's task moved from version %d to %d", theirs.Version, got.Version)
	}
	// With the dependency in its own tenant, the same create is taken.
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"theirs","queue":"up"}`, adm, http.StatusCreated)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"mine","queue":"down","depends_on":["theirs"]}`, adm, http.StatusCreated)
}
