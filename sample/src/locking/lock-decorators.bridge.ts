import { Injectable } from '@nestjs/common';
import { LockService } from '../../../lib';
import { useLockServiceForDecorators } from './switchable-locked.decorator';

/** TEMPORARY until @Locked lands: hands the LockService to the decorator (which has no injector). */
@Injectable()
export class LockDecoratorsBridge {
  constructor(locks: LockService) {
    useLockServiceForDecorators(locks);
  }
}
