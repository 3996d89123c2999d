import { Logger } from '@nestjs/common';

// Fault suites provoke lost leases and dead Redis servers on purpose; their warnings would bury the results.
Logger.overrideLogger(['error']);
