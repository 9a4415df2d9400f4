package topology_test

import (
	"errors"
	"fmt"

	"github.com/eisland/isle/topology"
)

func ExampleDecode() {
	body := []byte(`{"username":"alice","amountFen":"12.5","modelName":"deepseek-chat",
		"inputTokens":1200,"outputTokens":"350","Username":"ignored","unknown":true}`)
	m, err := topology.Decode[topology.AgentBillingDeduct](body)
	fmt.Println(m.Username, m.AmountFen, m.OutputTokens, err)

	_, err = topology.Decode[topology.AgentBillingDeduct]([]byte(`{"username":"alice","amountFen":"-1"}`))
	var de *topology.DecodeError
	if errors.As(err, &de) && de.Permanent() {
		fmt.Println("to the DLQ:", de.Field, "|", err)
	}
	// Output:
	// alice 12.5 350 <nil>
	// to the DLQ: amountFen | topology: decode AgentBillingDeductMessage: field amountFen: "-1": negative: an amount is more than zero (a deduction or a charge is never signed)
}

func ExampleEncode() {
	taskID := int64(1024)
	body, err := topology.Encode(topology.ObjectReplication{TaskID: &taskID, TraceID: "t-1"})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(string(body))
	// Output:
	// {"taskId":1024,"traceId":"t-1","lastError":null}
}
